<?php

// Boots slowly (3 s before the handshake), then serves like echo.php: for stopping while workers start.
declare(strict_types=1);

sleep(3);
require __DIR__ . '/../../php/echo.php';
