<?php

// Ignores SIGTERM and takes 30 s to boot: a stop must not wait for its boot (pool_test).
declare(strict_types=1);

pcntl_signal(SIGTERM, SIG_IGN);
sleep(30);
require __DIR__ . '/echo.php';
