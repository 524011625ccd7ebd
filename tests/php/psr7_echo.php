<?php

// PSR-7 bridge worker: method, uri, headers, query, cookies, body back as JSON.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';
require '/usr/share/php/Nyholm/Psr7/autoload.php';

use Ferry\Worker\Psr7Worker;
use Ferry\Worker\Worker;
use Nyholm\Psr7\Factory\Psr17Factory;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

$psr17 = new Psr17Factory();
$worker = new Psr7Worker(Worker::create(), $psr17, $psr17, $psr17);
$worker->serve(static function (ServerRequestInterface $request) use ($psr17): ResponseInterface {
    $server = $request->getServerParams();
    $body = json_encode([
        'method' => $request->getMethod(),
        'uri' => (string) $request->getUri(),
        'protocolVersion' => $request->getProtocolVersion(),
        'headers' => (object) $request->getHeaders(),
        'query' => (object) $request->getQueryParams(),
        'cookies' => (object) $request->getCookieParams(),
        'parsedBody' => $request->getParsedBody(),
        'files' => array_map(
            static fn ($f) => [
                'name' => $f->getClientFilename(),
                'type' => $f->getClientMediaType(),
                'size' => $f->getSize(),
                'error' => $f->getError(),
                'md5' => $f->getError() === UPLOAD_ERR_OK ? md5((string) $f->getStream()) : null,
            ],
            array_filter($request->getUploadedFiles(), static fn ($f) => $f instanceof Psr\Http\Message\UploadedFileInterface),
        ),
        'body' => (string) $request->getBody(),
        'remoteAddr' => $server['REMOTE_ADDR'] ?? null,
        'requestUri' => $server['REQUEST_URI'] ?? null,
        'pid' => getmypid(),
    ], JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE | JSON_THROW_ON_ERROR);
    return $psr17->createResponse(200)
        ->withHeader('Content-Type', 'application/json')
        ->withAddedHeader('Set-Cookie', 'a=1')
        ->withAddedHeader('Set-Cookie', 'b=2')
        ->withBody($psr17->createStream($body));
});
