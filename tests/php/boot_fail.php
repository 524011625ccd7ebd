<?php

// Crashes on boot: a message on stderr, exit code 2, no handshake.
declare(strict_types=1);

fwrite(STDERR, "boot_fail.php: cannot boot the application (on purpose)\n");
exit(2);
