<?php

declare(strict_types=1);

namespace Ferry\Worker;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestFactoryInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Message\StreamFactoryInterface;
use Psr\Http\Message\UploadedFileFactoryInterface;
use Psr\Http\Message\UploadedFileInterface;

/**
 * PSR-7 bridge over Worker, with any PSR-17 factories (same constructor as RoadRunner's PSR7Worker).
 *
 *     $psr17 = new Nyholm\Psr7\Factory\Psr17Factory();
 *     $worker = new Psr7Worker(Worker::create(), $psr17, $psr17, $psr17);
 *     while ($request = $worker->waitRequest()) {
 *         $worker->respond($psr17->createResponse(200)->withBody($psr17->createStream('hi')));
 *     }
 */
final class Psr7Worker
{
    /** @var array<string, mixed> */
    private readonly array $originalServer;

    public function __construct(
        private readonly Worker $worker,
        private readonly ServerRequestFactoryInterface $requestFactory,
        private readonly StreamFactoryInterface $streamFactory,
        private readonly UploadedFileFactoryInterface $uploadsFactory,
    ) {
        $this->originalServer = $_SERVER;
    }

    public function getWorker(): Worker
    {
        return $this->worker;
    }

    /** The next request, or null when the loop must end. */
    public function waitRequest(): ?ServerRequestInterface
    {
        $request = $this->worker->waitRequest();
        return $request === null ? null : $this->toPsr7($request);
    }

    /** Sends status, every header value and the whole body (rewound when seekable). */
    public function respond(ResponseInterface $response): void
    {
        $this->worker->respond($response->getStatusCode(), $response->getHeaders(), self::content($response));
    }

    private static function content(ResponseInterface $response): string
    {
        $body = $response->getBody();
        if ($body->isSeekable()) {
            $body->rewind();
        }
        return $body->isReadable() ? $body->getContents() : (string) $body;
    }

    public function error(string $message): void
    {
        $this->worker->error($message);
    }

    public function requestStop(): void
    {
        $this->worker->requestStop();
    }

    /**
     * Loops over requests with a PSR-15-like callable; exceptions become ERROR frames, and what the handler
     * prints goes before the response body (see Worker::serve()).
     *
     * @param callable(ServerRequestInterface): ResponseInterface $handler
     */
    public function serve(callable $handler): void
    {
        $this->worker->serve(function (Request $request) use ($handler): mixed {
            $response = $handler($this->toPsr7($request));
            if (!$response instanceof ResponseInterface) {
                throw new \UnexpectedValueException(
                    'the handler must return a ' . ResponseInterface::class . ', got ' . \get_debug_type($response),
                );
            }
            return [$response->getStatusCode(), $response->getHeaders(), self::content($response)];
        });
    }

    public function toPsr7(Request $request): ServerRequestInterface
    {
        $psr = $this->requestFactory
            ->createServerRequest($request->method, $request->uri, $this->serverParams($request))
            ->withProtocolVersion(self::protocolVersion($request->protocol))
            ->withCookieParams($request->cookies)
            ->withQueryParams($request->query);
        foreach ($request->headers as $name => $values) {
            $psr = $psr->withHeader((string) $name, $values);
        }
        foreach ($request->attributes as $name => $value) {
            $psr = $psr->withAttribute((string) $name, $value);
        }
        if ($request->uploads !== null && $request->uploads !== []) {
            $psr = $psr->withUploadedFiles($this->uploadedFiles($request->uploads));
        }
        if ($request->parsed) {
            return $psr->withParsedBody($request->form ?? []);
        }
        return $psr->withBody($this->streamFactory->createStream($request->body));
    }

    /** "HTTP/1.1" → "1.1", "HTTP/2.0" → "2". */
    private static function protocolVersion(string $protocol): string
    {
        $version = \str_starts_with($protocol, 'HTTP/') ? \substr($protocol, 5) : '1.1';
        return match ($version) {
            '2.0' => '2',
            '3.0' => '3',
            '' => '1.1',
            default => $version,
        };
    }

    /** @return array<string, mixed> */
    private function serverParams(Request $request): array
    {
        return ServerParams::of($request, $this->originalServer);
    }

    /**
     * @param array<mixed> $tree
     * @return array<mixed>
     */
    private function uploadedFiles(array $tree): array
    {
        $out = [];
        foreach ($tree as $key => $node) {
            if (!\is_array($node)) {
                continue;
            }
            $out[$key] = self::isFile($node) ? $this->uploadedFile($node) : $this->uploadedFiles($node);
        }
        return $out;
    }

    /** @param array<mixed> $node */
    private static function isFile(array $node): bool
    {
        return \array_key_exists('error', $node) && \array_key_exists('tmpName', $node) && !\is_array($node['error']);
    }

    /** @param array<mixed> $file */
    private function uploadedFile(array $file): UploadedFileInterface
    {
        $error = (int) $file['error'];
        $stream = null;
        if ($error === \UPLOAD_ERR_OK) {
            try {
                $stream = $this->streamFactory->createStreamFromFile((string) $file['tmpName'], 'rb');
            } catch (\RuntimeException $e) {
                $error = \UPLOAD_ERR_NO_FILE;
            }
        }
        return $this->uploadsFactory->createUploadedFile(
            $stream ?? $this->streamFactory->createStream(''),
            isset($file['size']) ? (int) $file['size'] : null,
            $error,
            isset($file['name']) ? (string) $file['name'] : null,
            isset($file['mime']) ? (string) $file['mime'] : null,
        );
    }
}
