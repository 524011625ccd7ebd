<?php

// echo.php, except that while the file named by $FERRY_TEST_BREAK exists it fails at boot as an app whose code
// was broken under it does: a PHP message on stderr, exit code 255, no handshake.
declare(strict_types=1);

$flag = getenv('FERRY_TEST_BREAK');
if (is_string($flag) && $flag !== '' && file_exists($flag)) {
    fwrite(STDERR, "PHP Parse error:  syntax error, unexpected token \"}\" in /app/src/Kernel.php on line 12\n");
    exit(255);
}
require __DIR__ . '/echo.php';
