<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Runtime\HttpFoundation;
use Ferry\Runtime\KernelRunner;
use Ferry\Worker\Codec;
use Ferry\Worker\Frame;
use Ferry\Worker\Request;
use Ferry\Worker\StreamRelay;
use Ferry\Worker\Tests\Support\Wire;
use Ferry\Worker\Worker;
use PHPUnit\Framework\TestCase;
use Symfony\Component\HttpFoundation\BinaryFileResponse;
use Symfony\Component\HttpFoundation\Cookie;
use Symfony\Component\HttpFoundation\File\UploadedFile;
use Symfony\Component\HttpFoundation\Request as SymfonyRequest;
use Symfony\Component\HttpFoundation\Response as SymfonyResponse;
use Symfony\Component\HttpFoundation\StreamedResponse;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\HttpKernel\TerminableInterface;

/** Ferry\Runtime: the Symfony Request built from Ferry's context, and responses sent back as frames. */
final class SymfonyRuntimeTest extends TestCase
{
    /** @var resource */
    private $out;

    protected function setUp(): void
    {
        if (!\class_exists(SymfonyRequest::class) || !\interface_exists(HttpKernelInterface::class)) {
            self::markTestSkipped('Symfony is not installed (scripts/setup.sh installs php-symfony-*)');
        }
    }

    private function bridge(): HttpFoundation
    {
        return new HttpFoundation(['APP_ENV' => 'test', 'argv' => ['x']], '/index.php', '/srv/app/public/index.php');
    }

    /** @param array<string, mixed> $ctx */
    private static function request(array $ctx, string $body = ''): Request
    {
        return Request::fromContext(Wire::context($ctx), $body, Frame::JSON);
    }

    /** @return list<Frame> */
    private function sent(): array
    {
        // without the handshake's answer
        return \array_values(\array_filter(
            Wire::frames(Wire::drain($this->out)),
            static fn (Frame $f): bool => ($f->flags & Frame::CONTROL) === 0,
        ));
    }

    private function worker(string $input): Worker
    {
        $this->out = Wire::memory();
        return new Worker(new StreamRelay(Wire::memory(Wire::pidFrame() . $input), $this->out), false);
    }

    /** @return array{int, array<string, list<string>>, string} status, headers, body of a response frame */
    private static function response(Frame $f): array
    {
        $ctx = \json_decode(\substr($f->payload, 0, $f->options[0]), true);
        return [$ctx['status'], $ctx['headers'] ?? [], \substr($f->payload, $f->options[0])];
    }

    public function testTheRequestAsSymfonySeesIt(): void
    {
        $sf = $this->bridge()->toSymfony(self::request(['uri' => 'https://example.test/some/path?a=1&b[]=x&b[]=y']));
        self::assertSame('POST', $sf->getMethod());
        self::assertSame('/some/path', $sf->getPathInfo());
        self::assertSame('', $sf->getBaseUrl());
        self::assertSame(['a' => '1', 'b' => ['x', 'y']], $sf->query->all());
        self::assertSame(['session' => 'abc def', 'theme' => 'dark'], $sf->cookies->all());
        self::assertSame('text/html, application/json', $sf->headers->get('Accept'));
        self::assertSame('10.0.0.7', $sf->getClientIp());
        self::assertTrue($sf->isSecure());
        self::assertSame('on', $sf->server->get('HTTPS'));
        self::assertSame('443', $sf->server->get('SERVER_PORT'));
        self::assertSame('/index.php', $sf->server->get('SCRIPT_NAME'));
        self::assertSame('/srv/app/public/index.php', $sf->server->get('SCRIPT_FILENAME'));
        self::assertSame('test', $sf->server->get('APP_ENV'));
        self::assertFalse($sf->server->has('argv'));
        self::assertIsFloat($sf->server->get('REQUEST_TIME_FLOAT'));
    }

    public function testFormsAndBodies(): void
    {
        $b = $this->bridge();
        $form = Codec::encode(Frame::JSON, ['x' => '1', 'y' => ['2', '3']]);
        $sf = $b->toSymfony(self::request(['parsed' => true], $form));
        self::assertSame(['x' => '1', 'y' => ['2', '3']], $sf->request->all());
        self::assertSame('', $sf->getContent());
        // a PUT's urlencoded body is its form, as Request::createFromGlobals() makes it
        $put = ['method' => 'PUT', 'headers' => ['Content-Type' => ['application/x-www-form-urlencoded; charset=UTF-8']]];
        $sf = $b->toSymfony(self::request($put, 'p=q&r[]=s'));
        self::assertSame(['p' => 'q', 'r' => ['s']], $sf->request->all());
        $sf = $b->toSymfony(self::request([], '{"j":1}'));
        self::assertSame('{"j":1}', $sf->getContent());
        self::assertSame([], $sf->request->all());
    }

    public function testUploadsAreUploadedFilesThatMove(): void
    {
        $dir = \sys_get_temp_dir() . '/ferry-sf-' . \bin2hex(\random_bytes(4));
        \mkdir($dir);
        $tmp = $dir . '/upload';
        \file_put_contents($tmp, 'file bytes');
        $uploads = [
            'doc' => ['name' => 'a b.txt', 'mime' => 'text/plain', 'size' => 10, 'error' => 0, 'tmpName' => $tmp],
            'none' => ['name' => '', 'mime' => '', 'size' => 0, 'error' => \UPLOAD_ERR_NO_FILE, 'tmpName' => ''],
            'big' => ['name' => 'big.bin', 'mime' => '', 'size' => 0, 'error' => \UPLOAD_ERR_INI_SIZE, 'tmpName' => ''],
            'list' => [['name' => 'n.txt', 'mime' => 'text/plain', 'size' => 10, 'error' => 0, 'tmpName' => $tmp]],
        ];
        $sf = $this->bridge()->toSymfony(self::request(['parsed' => true, 'uploads' => $uploads], '{}'));
        $doc = $sf->files->get('doc');
        self::assertInstanceOf(UploadedFile::class, $doc);
        self::assertTrue($doc->isValid());
        self::assertSame('a b.txt', $doc->getClientOriginalName());
        self::assertSame('text/plain', $doc->getClientMimeType());
        self::assertNull($sf->files->get('none'));
        self::assertFalse($sf->files->get('big')->isValid());
        self::assertSame(\UPLOAD_ERR_INI_SIZE, $sf->files->get('big')->getError());
        self::assertSame('n.txt', $sf->files->get('list')[0]->getClientOriginalName());
        $moved = $doc->move($dir, 'kept.txt');
        self::assertSame('file bytes', \file_get_contents($moved->getPathname()));
        self::assertFileDoesNotExist($tmp);
        \unlink($moved->getPathname());
        \rmdir($dir);
    }

    public function testABinaryFileResponseNamesItsFileWhenTheServerSendsFiles(): void
    {
        $file = \tempnam(\sys_get_temp_dir(), 'ferry-sf-');
        \file_put_contents($file, \str_repeat('x', 1000));
        $real = \realpath($file);
        $worker = $this->worker(Wire::request() . Wire::request() . Wire::request());
        $b = $this->bridge();
        $range = SymfonyRequest::create('/f', 'GET', [], [], [], ['HTTP_RANGE' => 'bytes=0-9']);
        $worker->waitRequest();
        $b->send($worker, (new BinaryFileResponse($file))->prepare($range), '', true);
        $worker->waitRequest();
        $b->send($worker, new BinaryFileResponse($file), '', false); // no sendfile: through the pipe
        $worker->waitRequest();
        $b->send($worker, (new BinaryFileResponse($file))->deleteFileAfterSend(true), '', true);
        $frames = $this->sent();
        [$status, $headers, $body] = self::response($frames[0]);
        self::assertSame([200, ''], [$status, $body]); // the server answers the range from the file itself
        self::assertSame([$real], $headers['X-Sendfile']);
        self::assertArrayNotHasKey('Content-Range', $headers);
        self::assertArrayNotHasKey('Content-Length', $headers);
        $piped = '';
        foreach (\array_slice($frames, 1) as $f) {
            self::assertArrayNotHasKey('X-Sendfile', self::response($f)[1]);
            $piped .= self::response($f)[2];
        }
        // the second whole, and the third (to be deleted after sending) too, through the pipe
        self::assertSame(\str_repeat('x', 2000), $piped);
        self::assertFileDoesNotExist($file);
    }

    public function testAPsr15HandlerIsServedThroughPsr7(): void
    {
        $worker = $this->worker(Wire::request(['uri' => 'http://h/a?x=1', 'rawQuery' => 'x=1']) . Wire::request(['uri' => 'http://h/b']));
        $psr17 = new \Nyholm\Psr7\Factory\Psr17Factory();
        $handler = new class ($psr17) {
            public function __construct(private readonly \Nyholm\Psr7\Factory\Psr17Factory $f)
            {
            }

            public function handle(\Psr\Http\Message\ServerRequestInterface $r): \Psr\Http\Message\ResponseInterface
            {
                return $this->f->createResponse(202)->withHeader('X-Path', $r->getUri()->getPath())
                    ->withBody($this->f->createStream('q=' . \json_encode($r->getQueryParams())));
            }
        };
        self::assertSame(0, (new \Ferry\Runtime\Psr15Runner($handler, $worker))->run());
        $frames = $this->sent();
        [$status, $headers, $body] = self::response($frames[0]);
        self::assertSame([202, ['/a'], 'q={"x":"1"}'], [$status, $headers['X-Path'], $body]);
        self::assertSame(['/b'], self::response($frames[1])[1]['X-Path']);
    }

    public function testTheRunnerServesRequestsAndTerminates(): void
    {
        $worker = $this->worker(Wire::request(['uri' => 'http://h/one']) . Wire::request(['uri' => 'http://h/echo'])
            . Wire::request(['uri' => 'http://h/stream']) . Wire::request(['uri' => 'http://h/throw'])
            . Wire::request(['uri' => 'http://h/one']));
        $kernel = new class () implements HttpKernelInterface, TerminableInterface {
            /** @var list<string> */
            public array $terminated = [];

            public function handle(SymfonyRequest $request, int $type = self::MAIN_REQUEST, bool $catch = true): SymfonyResponse
            {
                switch ($request->getPathInfo()) {
                    case '/echo':
                        echo 'printed ';
                        return new SymfonyResponse('body', 201, ['Content-Length' => '4']);
                    case '/stream':
                        return new StreamedResponse(function () {
                            echo 'a';
                            echo 'b';
                        }, 200, ['Content-Type' => 'text/plain']);
                    case '/throw':
                        throw new \LogicException('not caught');
                }
                $r = new SymfonyResponse('one', 200, ['X-A' => 'b']);
                $r->headers->setCookie(Cookie::create('c1', 'v1'));
                $r->headers->setCookie(Cookie::create('c2', 'v2'));
                return $r;
            }

            public function terminate(SymfonyRequest $request, SymfonyResponse $response): void
            {
                $this->terminated[] = $request->getPathInfo();
            }
        };
        $exit = (new KernelRunner($kernel, $this->bridge(), $worker))->run();
        self::assertSame(0, $exit);
        $frames = $this->sent();
        [$status, $headers, $body] = self::response($frames[0]);
        self::assertSame([200, 'one'], [$status, $body]);
        self::assertSame(['b'], $headers['X-A']);
        self::assertCount(2, $headers['Set-Cookie']);
        self::assertStringStartsWith('c1=v1;', $headers['Set-Cookie'][0]);
        // printed output first, and the response's Content-Length (now wrong) dropped
        [$status, $headers, $body] = self::response($frames[1]);
        self::assertSame([201, 'printed body'], [$status, $body]);
        self::assertArrayNotHasKey('Content-Length', $headers);
        // a streamed response: a frame per print, then the end
        self::assertSame(Frame::STREAM, $frames[2]->stream & Frame::STREAM);
        self::assertSame('a', self::response($frames[2])[2]);
        self::assertSame('b', self::response($frames[3])[2]);
        self::assertSame(0, $frames[4]->stream & Frame::STREAM);
        self::assertSame('', self::response($frames[4])[2]);
        // an exception the kernel let through: an ERROR frame (500), and the worker goes on
        self::assertSame(Frame::ERROR, $frames[5]->flags & Frame::ERROR);
        self::assertSame('one', self::response($frames[6])[2]);
        self::assertCount(7, $frames);
        self::assertSame(['/one', '/echo', '/stream', '/one'], $kernel->terminated);
    }
}
