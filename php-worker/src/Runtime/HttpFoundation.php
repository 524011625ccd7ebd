<?php

declare(strict_types=1);

namespace Ferry\Runtime;

use Ferry\Worker\Request;
use Ferry\Worker\ServerParams;
use Ferry\Worker\Worker;
use Symfony\Component\HttpFoundation\BinaryFileResponse;
use Symfony\Component\HttpFoundation\File\UploadedFile;
use Symfony\Component\HttpFoundation\Request as SymfonyRequest;
use Symfony\Component\HttpFoundation\Response as SymfonyResponse;
use Symfony\Component\HttpFoundation\StreamedResponse;

/**
 * Ferry's request as a Symfony Request (built directly, no PSR-7 round trip), and a Symfony Response sent
 * back through the worker: status, headers, each Set-Cookie, a streamed body as it is printed.
 */
final class HttpFoundation
{
    /** Bytes a BinaryFileResponse is read in (it goes through the pipe). */
    private const FILE_CHUNK = 65536;

    /**
     * @param array<string, mixed> $baseServer the worker's $_SERVER at boot
     * @param string               $script     SCRIPT_NAME ("/index.php" for public/index.php)
     * @param string               $scriptFile SCRIPT_FILENAME (the front controller's real path)
     * @param class-string<UploadedFile> $fileClass the uploads' class (Laravel's Illuminate\Http\UploadedFile,
     *                                   which Laravel's Request would otherwise rebuild out of test mode)
     * @param class-string<SymfonyRequest> $requestClass the request's class (Laravel's Illuminate\Http\Request,
     *                                   built at once rather than copied from a Symfony one)
     */
    public function __construct(
        private readonly array $baseServer,
        private readonly string $script,
        private readonly string $scriptFile,
        private readonly string $fileClass = UploadedFile::class,
        private readonly string $requestClass = SymfonyRequest::class,
    ) {
    }

    public function toSymfony(Request $request): SymfonyRequest
    {
        $server = ServerParams::of($request, $this->baseServer, $this->script);
        if ($this->scriptFile !== '') {
            $server['SCRIPT_FILENAME'] = $this->scriptFile;
            $server['DOCUMENT_ROOT'] ??= \dirname($this->scriptFile);
        }
        $post = $request->parsed ? ($request->form ?? []) : [];
        $content = $request->parsed ? '' : $request->body;
        // As Request::createFromGlobals(): a urlencoded body of a PUT, DELETE or PATCH is the request's form.
        if (!$request->parsed && $content !== ''
            && \in_array(\strtoupper($request->method), ['PUT', 'DELETE', 'PATCH'], true)
            && \str_starts_with(\strtolower((string) $request->header('Content-Type')), 'application/x-www-form-urlencoded')) {
            \parse_str($content, $post);
        }
        $files = $request->uploads !== null ? $this->files($request->uploads) : [];
        return new ($this->requestClass)($request->query, $post, $request->attributes, $request->cookies, $files, $server, $content);
    }

    /**
     * Sends $response for the current request of $worker; $printed (what the application echoed while it
     * handled the request) goes first, as php-fpm sends it before the body.
     */
    public function send(Worker $worker, SymfonyResponse $response, string $printed = '', bool $sendfile = false): void
    {
        if ($sendfile && $printed === '' && $response instanceof BinaryFileResponse && $this->sendFile($worker, $response)) {
            return;
        }
        $status = $response->getStatusCode();
        $headers = $response->headers->allPreserveCaseWithoutCookies();
        $cookies = [];
        foreach ($response->headers->getCookies() as $cookie) {
            $cookies[] = (string) $cookie;
        }
        if ($cookies !== []) {
            $headers['Set-Cookie'] = $cookies;
        }
        if ($printed !== '') {
            unset($headers['Content-Length'], $headers['content-length']);
        }
        if ($response instanceof StreamedResponse || $response instanceof BinaryFileResponse) {
            $stream = $worker->openStream($status, $headers);
            if ($printed !== '') {
                $stream->write($printed);
            }
            $level = \ob_get_level();
            // Every print of the callback (or every FILE_CHUNK bytes of the file) goes out as it comes.
            \ob_start(static function (string $buffer) use ($stream): string {
                if ($buffer !== '') {
                    $stream->write($buffer);
                }
                return '';
            }, $response instanceof BinaryFileResponse ? self::FILE_CHUNK : 1);
            try {
                $response->sendContent();
            } finally {
                while (\ob_get_level() > $level) {
                    \ob_end_flush();
                }
                $stream->close();
            }
            return;
        }
        $worker->respond($status, $headers, $printed . (string) $response->getContent());
    }

    /**
     * A BinaryFileResponse sent by the server from its file (http.middleware "sendfile": the request said
     * X-Sendfile-Type: X-Sendfile): an X-Sendfile header, no body; the server answers Range and conditional
     * requests itself, so a range Symfony prepared goes back to the whole file's 200. False when the file is
     * to be deleted after sending (the server could not do that): it then goes through the pipe.
     */
    private function sendFile(Worker $worker, BinaryFileResponse $response): bool
    {
        $deleteAfter = (fn (): bool => (bool) $this->deleteFileAfterSend)->call($response);
        $path = $response->getFile()->getRealPath();
        if ($deleteAfter || $path === false) {
            return false;
        }
        $status = $response->getStatusCode();
        if ($status === 206 || $status === 416) {
            $status = 200;
        }
        $headers = $response->headers->allPreserveCaseWithoutCookies();
        foreach (\array_keys($headers) as $name) {
            if (\in_array(\strtolower((string) $name), ['content-length', 'content-range', 'accept-ranges'], true)) {
                unset($headers[$name]);
            }
        }
        $cookies = [];
        foreach ($response->headers->getCookies() as $cookie) {
            $cookies[] = (string) $cookie;
        }
        if ($cookies !== []) {
            $headers['Set-Cookie'] = $cookies;
        }
        $headers['X-Sendfile'] = [$path];
        $worker->respond($status, $headers, '');
        return true;
    }

    /**
     * Ferry's uploads tree as UploadedFile objects (in test mode: they did not come through PHP's own upload
     * handling, so move() renames; the server removes what the application did not move).
     *
     * @param array<mixed> $tree
     * @return array<mixed>
     */
    private function files(array $tree): array
    {
        $out = [];
        foreach ($tree as $key => $node) {
            if (!\is_array($node)) {
                continue;
            }
            if (\array_key_exists('error', $node) && \array_key_exists('tmpName', $node) && !\is_array($node['error'])) {
                $error = (int) $node['error'];
                if ($error === \UPLOAD_ERR_NO_FILE) { // as PHP puts it in $_FILES: FileBag makes it null
                    $out[$key] = ['name' => '', 'type' => '', 'tmp_name' => '', 'error' => $error, 'size' => 0];
                    continue;
                }
                $out[$key] = new ($this->fileClass)(
                    (string) $node['tmpName'],
                    (string) ($node['name'] ?? ''),
                    isset($node['mime']) ? (string) $node['mime'] : null,
                    $error,
                    true,
                );
                continue;
            }
            $out[$key] = $this->files($node);
        }
        return $out;
    }
}
