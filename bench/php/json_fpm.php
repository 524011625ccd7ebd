<?php

// bench/compression.sh's php-fpm script: the same answers as json_ferry.php.
declare(strict_types=1);

require __DIR__ . '/json_payload.php';

if (parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH) === '/') {
    header('Content-Type: text/plain');
    echo 'Hello, World!';
    return;
}
header('Content-Type: application/json');
echo bench_json_payload();
