<?php

// The example app: every request gets a small page; /json shows what PHP received. Files under public/
// (the page's stylesheet and logo) are served by Ferry's static handler and never reach this worker.
declare(strict_types=1);

// FERRY_PHP_WORKER: Ferry's PHP library, which ferry tells its workers (installed or in this repository).
require (getenv('FERRY_PHP_WORKER') ?: __DIR__ . '/../../php-worker') . '/autoload.php';

use Ferry\Worker\Worker;

$booted = date(DATE_ATOM);
$count = 0;

$worker = Worker::create();
while ($req = $worker->waitRequest()) {
    $count++;
    if ($req->path === '/json') {
        $worker->respond(200, ['Content-Type' => 'application/json'], json_encode([
            'method' => $req->method,
            'uri' => $req->uri,
            'query' => $req->query,
            'headers' => $req->headers,
            'cookies' => $req->cookies,
            'body' => $req->body,
            'pid' => getmypid(),
            'served_by_this_worker' => $count,
        ], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES) . "\n");
        continue;
    }
    $pid = getmypid();
    $name = htmlspecialchars((string) ($req->query['name'] ?? 'world'));
    $worker->respond(200, ['Content-Type' => 'text/html; charset=utf-8'], <<<HTML
        <!doctype html>
        <title>Ferry</title>
        <link rel="stylesheet" href="/style.css">
        <h1><img src="/logo.svg" alt="">Hello, {$name}!</h1>
        <p>Served by PHP worker {$pid} (booted {$booted}), request #{$count} of this worker.</p>
        <p>Try <a href="/json?name=ferry">/json</a>. The stylesheet and the logo come from <code>public/</code>,
        sent by Ferry itself without reaching PHP.</p>
        HTML);
}
