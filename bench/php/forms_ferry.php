<?php

// Ferry worker of bench/forms.sh (plain API); bench/php/forms_fpm.php gives php-fpm the same answers.
//   /form    the urlencoded form the server parsed: "<number of fields> <field20>"
//   /upload  the uploaded file "file" the server stored: "<error> <size> <size of the temp file>"
//   else     "Hello, World!" (the readiness check)
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    switch ($req->path) {
        case '/form':
            $form = $req->form ?? [];
            $body = count($form) . ' ' . ($form['field20'] ?? '-');
            break;
        case '/upload':
            $file = $req->uploads['file'] ?? null;
            $body = $file === null ? 'no file'
                : $file['error'] . ' ' . $file['size'] . ' ' . (int) @filesize($file['tmpName']);
            break;
        default:
            $body = 'Hello, World!';
    }
    $worker->respond(200, ['Content-Type' => 'text/plain'], $body);
}
