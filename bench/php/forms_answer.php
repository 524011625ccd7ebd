<?php

// The answers of bench/forms.sh's Ferry worker (forms_ferry.php), shared with bench/php/soak.php:
//   /form    the urlencoded form the server parsed: "<number of fields> <field20>"
//   /upload  the uploaded file "file" the server stored: "<error> <size> <size of the temp file>"
//   else     "Hello, World!" (the readiness check)
declare(strict_types=1);

function formsAnswer(Ferry\Worker\Request $req): string
{
    switch ($req->path) {
        case '/form':
            $form = $req->form ?? [];
            return count($form) . ' ' . ($form['field20'] ?? '-');
        case '/upload':
            $file = $req->uploads['file'] ?? null;
            return $file === null ? 'no file'
                : $file['error'] . ' ' . $file['size'] . ' ' . (int) @filesize($file['tmpName']);
        default:
            return 'Hello, World!';
    }
}
