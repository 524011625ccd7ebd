<?php

// The PHP side of one route alone (bench/frameworks.sh): the example app booted once and served by Ferry's
// runner (Ferry\Runtime\KernelRunner for Symfony, Ferry\Laravel\Runner for Laravel) from request frames held
// in memory, the answers written to /dev/null; no server, no client, no pipe. Prints the mean wall time per
// request in µs after WARM requests. With P PHP processes on P cores no server can serve this route faster
// than P / that time, whatever it costs itself: the ceiling of the Ferry ÷ php-fpm ratio.
//
//     php [opcache flags] bench/framework_php_time.php symfony|laravel APP_DIR ROUTE COOKIE_FILE|- N [WARM]
//
// COOKIE_FILE: one line of cookies per session ("a=1; b=2"), cycled through as the returning-visitor runs do.

declare(strict_types=1);

[$self, $app, $dir, $route, $cookieFile, $n] = $argv + [null, '', '', '/', '-', '2000'];
$n = (int) $n;
$warm = (int) ($argv[6] ?? 200);
if (!in_array($app, ['symfony', 'laravel'], true) || !is_dir($dir) || $n <= 0) {
    fwrite(STDERR, "usage: php {$self} symfony|laravel APP_DIR ROUTE COOKIE_FILE|- N [WARM]\n");
    exit(2);
}
$dir = rtrim((string) realpath($dir), '/');

require_once $dir . '/vendor/autoload.php';
require_once dirname(__DIR__) . '/php-worker/autoload.php'; // after the app's: its autoload.php may set globals

/** Counts the frames read and notes the time when the first measured one is asked for and at the end. */
final class TimedRelay implements Ferry\Worker\Relay
{
    public int $reads = 0;
    public int $start = 0;
    public int $end = 0;

    public function __construct(private readonly Ferry\Worker\Relay $inner, private readonly int $warm)
    {
    }

    public function receive(): ?Ferry\Worker\Frame
    {
        if ($this->reads++ === $this->warm) {
            $this->start = hrtime(true);
        }
        $frame = $this->inner->receive();
        if ($frame === null) {
            $this->end = hrtime(true);
        }
        return $frame;
    }

    /** @var array<int, int> status => responses (one in 8 looked at: decoding costs time too) */
    public array $statuses = [];
    private int $sent = 0;

    public function send(string $frame): void
    {
        $f = $this->sent++ % 8 === 0 ? Ferry\Worker\Frame::decode($frame) : null;
        if ($f !== null && ($f->flags & Ferry\Worker\Frame::CONTROL) === 0 && $f->options !== []) {
            $ctx = Ferry\Worker\Codec::decode(Ferry\Worker\Codec::fromFlags($f->flags), substr($f->payload, 0, $f->options[0]));
            $status = (int) ($ctx['status'] ?? 0);
            $this->statuses[$status] = ($this->statuses[$status] ?? 0) + 1;
        }
        $this->inner->send($frame);
    }
}

$sessions = $cookieFile === '-' ? [''] : array_values(array_filter(array_map('trim', (array) file($cookieFile))));
$host = '127.0.0.1:8080';
$frames = '';
for ($i = 0; $i < $n + $warm; ++$i) {
    $line = $sessions[$i % count($sessions)];
    $cookies = [];
    foreach ($line === '' ? [] : explode(';', $line) as $pair) {
        [$name, $value] = explode('=', trim($pair), 2) + [1 => ''];
        $cookies[$name] = urldecode($value);
    }
    $headers = ['Host' => [$host], 'User-Agent' => ['wrk'], 'Accept' => ['*/*']];
    if ($line !== '') {
        $headers['Cookie'] = [$line];
    }
    $ctx = msgpack_pack([
        'remoteAddr' => '127.0.0.1', 'protocol' => 'HTTP/1.1', 'method' => 'GET', 'uri' => "http://{$host}{$route}",
        'headers' => $headers, 'cookies' => $cookies, 'rawQuery' => '', 'parsed' => false, 'uploads' => null,
        'attributes' => [],
    ]);
    $frames .= Ferry\Worker\Frame::pack(Ferry\Worker\Frame::MSGPACK, $ctx, [strlen($ctx)]);
}

$in = fopen('php://memory', 'w+b');
fwrite($in, $frames);
rewind($in);
$relay = new TimedRelay(new Ferry\Worker\StreamRelay($in, fopen('/dev/null', 'wb')), $warm);
$worker = new Ferry\Worker\Worker($relay, true, false);

if ($app === 'symfony') {
    $_SERVER['APP_ENV'] = $_ENV['APP_ENV'] = 'prod';
    $_SERVER['APP_DEBUG'] = $_ENV['APP_DEBUG'] = '0';
    $server = $_SERVER;
    unset($server['argv'], $server['argc'], $server['SCRIPT_FILENAME'], $server['SCRIPT_NAME'], $server['PHP_SELF']);
    $runner = new Ferry\Runtime\KernelRunner(
        new App\Kernel('prod', false),
        new Ferry\Runtime\HttpFoundation($server, '/index.php', $dir . '/public/index.php'),
        $worker,
    );
} else {
    $_SERVER['APP_ENV'] = $_ENV['APP_ENV'] = 'production';
    $_SERVER['APP_DEBUG'] = $_ENV['APP_DEBUG'] = 'false';
    putenv('APP_ENV=production');
    putenv('APP_DEBUG=false');
    $runner = Ferry\Laravel\Runner::boot($dir);
}
ob_start(); // what the app prints at the end, e.g. an error page, must not reach the numbers
$app === 'symfony' ? $runner->run() : $runner->run($worker);
ob_end_clean();
if ($relay->end === 0 || $relay->start === 0 || array_keys($relay->statuses) !== [200]) {
    fwrite(STDERR, sprintf("the runner stopped early or answered other than 200: %s\n", json_encode($relay->statuses)));
    exit(1);
}
printf("%.1f\n", ($relay->end - $relay->start) / 1e3 / $n);
