<?php

// php-fpm script of bench/forms.sh: the same answers as bench/php/forms_ferry.php, from $_POST and $_FILES.
declare(strict_types=1);

switch (parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH)) {
    case '/form':
        echo count($_POST), ' ', $_POST['field20'] ?? '-';
        break;
    case '/upload':
        $file = $_FILES['file'] ?? null;
        echo $file === null ? 'no file'
            : $file['error'] . ' ' . $file['size'] . ' ' . (int) @filesize($file['tmp_name']);
        break;
    default:
        echo 'Hello, World!';
}
