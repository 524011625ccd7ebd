<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * $_SERVER of one request, as php-fpm behind nginx gives it: the worker's own (its environment) with the
 * request's variables on top. Shared by the PSR-7 bridge and the Symfony runtime.
 */
final class ServerParams
{
    /**
     * @param array<string, mixed> $base   the worker's $_SERVER at boot
     * @param string               $script the front controller's path in the URL space (SCRIPT_NAME), or ''
     * @return array<string, mixed>
     */
    public static function of(Request $request, array $base, string $script = ''): array
    {
        $now = \microtime(true);
        $server = $base;
        unset($server['argv'], $server['argc']);
        $server['REQUEST_TIME'] = (int) $now;
        $server['REQUEST_TIME_FLOAT'] = $now;
        $server['REMOTE_ADDR'] = $request->remoteAddr;
        $server['REQUEST_METHOD'] = $request->method;
        $server['REQUEST_URI'] = $request->path . ($request->rawQuery !== '' ? '?' . $request->rawQuery : '');
        $server['SERVER_PROTOCOL'] = $request->protocol;
        $server['QUERY_STRING'] = $request->rawQuery;
        $parts = \parse_url($request->uri);
        $https = ($parts['scheme'] ?? '') === 'https';
        if (isset($parts['host'])) {
            $server['HTTP_HOST'] = $parts['host'] . (isset($parts['port']) ? ':' . $parts['port'] : '');
            $server['SERVER_NAME'] = $parts['host'];
            $server['SERVER_PORT'] = (string) ($parts['port'] ?? ($https ? 443 : 80));
        }
        if ($https) {
            $server['HTTPS'] = 'on';
        } else {
            unset($server['HTTPS']);
        }
        if ($script !== '') {
            $server['SCRIPT_NAME'] = $script;
            $server['PHP_SELF'] = $script;
        }
        foreach ($request->headers as $name => $values) {
            // As nginx and PHP-FPM do by default: a name with an underscore would map to the same key as its
            // dashed twin (X_Forwarded_For vs X-Forwarded-For) and could override it, so it is dropped.
            if (\str_contains((string) $name, '_')) {
                continue;
            }
            $key = \strtoupper(\str_replace('-', '_', (string) $name));
            $value = \implode(', ', $values);
            if ($key === 'CONTENT_TYPE' || $key === 'CONTENT_LENGTH') {
                $server[$key] = $value;
            } else {
                $server['HTTP_' . $key] = $value;
            }
        }
        return $server;
    }
}
