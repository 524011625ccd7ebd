<?php

// Ferry worker of bench/forms.sh (plain API); bench/php/forms_fpm.php gives php-fpm the same answers.
//   /form    the urlencoded form the server parsed: "<number of fields> <field20>"
//   /upload  the uploaded file "file" the server stored: "<error> <size> <size of the temp file>"
//   else     "Hello, World!" (the readiness check)
// (bench/php/forms_answer.php)
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';
require __DIR__ . '/forms_answer.php';

$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    $worker->respond(200, ['Content-Type' => 'text/plain'], formsAnswer($req));
}
