<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Codec;
use Ferry\Worker\Frame;
use Ferry\Worker\Psr7Worker;
use Ferry\Worker\StreamRelay;
use Ferry\Worker\Tests\Support\CaptureFilter;
use Ferry\Worker\Tests\Support\Wire;
use Ferry\Worker\Worker;
use Nyholm\Psr7\Factory\Psr17Factory;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Message\UploadedFileInterface;
use PHPUnit\Framework\TestCase;

final class Psr7WorkerTest extends TestCase
{
    /** @var resource */
    private $out;
    private Psr17Factory $psr17;

    private function psr7(string $input): Psr7Worker
    {
        $this->out = Wire::memory();
        $this->psr17 = new Psr17Factory();
        $worker = new Worker(new StreamRelay(Wire::memory(Wire::pidFrame() . $input), $this->out), false);
        return new Psr7Worker($worker, $this->psr17, $this->psr17, $this->psr17);
    }

    /** @return list<Frame> */
    private function sent(): array
    {
        return Wire::frames(Wire::drain($this->out));
    }

    public function testBuildsTheServerRequest(): void
    {
        $worker = $this->psr7(Wire::request(['protocol' => 'HTTP/2.0'], 'the body'));
        $before = \microtime(true);
        $req = $worker->waitRequest();
        self::assertInstanceOf(ServerRequestInterface::class, $req);
        self::assertSame('POST', $req->getMethod());
        // Nyholm's Uri percent-encodes the brackets of the query.
        self::assertSame('http://example.test:8080/some/path?a=1&b%5B%5D=x&b%5B%5D=y', (string) $req->getUri());
        self::assertSame('/some/path', $req->getUri()->getPath());
        self::assertSame('2', $req->getProtocolVersion());
        self::assertSame(['text/html', 'application/json'], $req->getHeader('accept'));
        self::assertSame('text/plain', $req->getHeaderLine('Content-Type'));
        self::assertSame('example.test:8080', $req->getHeaderLine('Host'));
        self::assertSame(['session' => 'abc def', 'theme' => 'dark'], $req->getCookieParams());
        self::assertSame(['a' => '1', 'b' => ['x', 'y']], $req->getQueryParams());
        self::assertSame('the body', (string) $req->getBody());
        self::assertNull($req->getParsedBody());

        $server = $req->getServerParams();
        self::assertSame('10.0.0.7', $server['REMOTE_ADDR']);
        self::assertSame('POST', $server['REQUEST_METHOD']);
        self::assertSame('/some/path?a=1&b[]=x&b[]=y', $server['REQUEST_URI']);
        self::assertSame('HTTP/2.0', $server['SERVER_PROTOCOL']);
        self::assertSame('a=1&b[]=x&b[]=y', $server['QUERY_STRING']);
        self::assertSame('text/plain', $server['CONTENT_TYPE']);
        self::assertSame('text/html, application/json', $server['HTTP_ACCEPT']);
        self::assertSame('example.test:8080', $server['HTTP_HOST']);
        self::assertIsInt($server['REQUEST_TIME']);
        self::assertIsFloat($server['REQUEST_TIME_FLOAT']);
        self::assertGreaterThanOrEqual($before, $server['REQUEST_TIME_FLOAT']);
        self::assertEqualsWithDelta(\time(), $server['REQUEST_TIME'], 2);
    }

    public function testHeaderNamesWithUnderscoresDoNotReachServerParams(): void
    {
        // X_Forwarded_For would map to HTTP_X_FORWARDED_FOR too and override the proxy's X-Forwarded-For
        // (issue 5 item 16): dropped from the server params, as nginx and PHP-FPM do.
        $headers = [
            'X-Forwarded-For' => ['10.1.1.1'],
            'X_Forwarded_For' => ['6.6.6.6'],
            'Client_Ip' => ['6.6.6.6'],
        ];
        foreach ([['X-Forwarded-For', 'X_Forwarded_For', 'Client_Ip'], ['X_Forwarded_For', 'Client_Ip', 'X-Forwarded-For']] as $order) {
            $ordered = [];
            foreach ($order as $name) {
                $ordered[$name] = $headers[$name];
            }
            $req = $this->psr7(Wire::request(['headers' => $ordered]))->waitRequest();
            self::assertInstanceOf(ServerRequestInterface::class, $req);
            $server = $req->getServerParams();
            self::assertSame('10.1.1.1', $server['HTTP_X_FORWARDED_FOR']);
            self::assertArrayNotHasKey('HTTP_CLIENT_IP', $server);
            // The PSR-7 headers themselves are what the client sent.
            self::assertSame('6.6.6.6', $req->getHeaderLine('X_Forwarded_For'));
        }
    }

    public function testParsedFormAttributesAndUploads(): void
    {
        $tmp = (string) \tempnam(\sys_get_temp_dir(), 'ferry-up-');
        \file_put_contents($tmp, 'file content');
        $uploads = [
            'doc' => ['name' => 'a.txt', 'mime' => 'text/plain', 'size' => 12, 'error' => 0, 'tmpName' => $tmp],
            'many' => [
                ['name' => 'b.bin', 'mime' => 'application/octet-stream', 'size' => 0, 'error' => 4, 'tmpName' => ''],
            ],
        ];
        $form = Codec::encode(Frame::JSON, ['name' => 'x', 'tags' => ['a', 'b']]);
        $worker = $this->psr7(Wire::request(['parsed' => true, 'uploads' => $uploads, 'attributes' => ['k' => 'v']], $form));
        $req = $worker->waitRequest();
        \unlink($tmp);
        self::assertNotNull($req);
        self::assertSame(['name' => 'x', 'tags' => ['a', 'b']], $req->getParsedBody());
        self::assertSame('v', $req->getAttribute('k'));
        $files = $req->getUploadedFiles();
        self::assertInstanceOf(UploadedFileInterface::class, $files['doc']);
        self::assertSame('a.txt', $files['doc']->getClientFilename());
        self::assertSame('text/plain', $files['doc']->getClientMediaType());
        self::assertSame(12, $files['doc']->getSize());
        self::assertSame(\UPLOAD_ERR_OK, $files['doc']->getError());
        self::assertSame('file content', (string) $files['doc']->getStream());
        self::assertSame(\UPLOAD_ERR_NO_FILE, $files['many'][0]->getError());
    }

    public function testRespondEmitsTheFrame(): void
    {
        $worker = $this->psr7(Wire::request());
        self::assertNotNull($worker->waitRequest());
        $body = $this->psr17->createStream('response body');
        // Stream left at its end: respond() must rewind it.
        $response = $this->psr17->createResponse(418)
            ->withHeader('Content-Type', 'text/plain')
            ->withAddedHeader('Set-Cookie', 'a=1')
            ->withAddedHeader('Set-Cookie', 'b=2')
            ->withBody($body);
        self::assertSame(13, $body->tell());
        $worker->respond($response);
        $frames = $this->sent();
        self::assertCount(2, $frames);
        self::assertSame(Frame::JSON, $frames[1]->flags);
        [$ctx, $sentBody] = Wire::response($frames[1], Frame::JSON);
        self::assertSame('response body', $sentBody);
        self::assertSame(418, $ctx['status']);
        self::assertSame(['text/plain'], $ctx['headers']['Content-Type']);
        self::assertSame(['a=1', 'b=2'], $ctx['headers']['Set-Cookie']);
    }

    public function testRespondReadsANonSeekableBodyFromItsPosition(): void
    {
        $worker = $this->psr7(Wire::request());
        $worker->waitRequest();
        $pipe = \popen('printf streamed', 'r');
        $stream = $this->psr17->createStreamFromResource($pipe);
        self::assertFalse($stream->isSeekable());
        $worker->respond($this->psr17->createResponse(200)->withBody($stream));
        self::assertSame('streamed', Wire::response($this->sent()[1], Frame::JSON)[1]);
    }

    public function testServeWithPsr7Handler(): void
    {
        $worker = $this->psr7(Wire::request(['method' => 'GET']) . Wire::request(['method' => 'DELETE']));
        $log = CaptureFilter::stderr(function () use ($worker): void {
            $worker->serve(function (ServerRequestInterface $r) {
                if ($r->getMethod() === 'DELETE') {
                    throw new \DomainException('no deleting');
                }
                return $this->psr17->createResponse(204);
            });
        });
        $frames = $this->sent();
        self::assertCount(3, $frames);
        self::assertSame(204, Wire::response($frames[1], Frame::JSON)[0]['status']);
        self::assertSame(Frame::ERROR, $frames[2]->flags);
        self::assertSame('no deleting', $frames[2]->payload);
        self::assertStringContainsString('DomainException', $log);
    }
}
