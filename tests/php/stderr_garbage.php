<?php

// Writes bytes no log line would choose to stderr, at boot and on every request: invalid UTF-8, quotes,
// backslashes, control characters, an escape sequence, NUL, a JSON look-alike, a line longer than the
// server's 16 KiB piece with a UTF-8 character across the cut, and a last line without its newline. The
// server's JSON log must stay valid. Answers "ok".
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

function garbage(string $tag): void
{
    $long = str_repeat('a', 16 * 1024 - 1) . "\u{e9}" . str_repeat('b', 100);
    fwrite(STDERR, "$tag invalid \xff\xfe \xc3( \xed\xa0\x80 \xf0\x9f\x98 end\n"
        . "$tag quote \" backslash \\ tab \t cr \r bell \x07 nul \x00 esc \x1b[31mred\x1b[0m del \x7f\n"
        . "$tag {\"msg\":\"fake\",\"level\":\"error\"}\n"
        . "$tag valid caf\u{e9} \u{1f600}\n"
        . "$tag long $long\n"
        . "$tag no newline");
    fflush(STDERR);
}

garbage('boot');
$worker = Ferry\Worker\Worker::create();
while ($worker->waitRequest() !== null) {
    garbage('request');
    fwrite(STDERR, "\n");
    $worker->respond(200, ['Content-Type' => 'text/plain'], 'ok');
}
