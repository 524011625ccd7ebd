<?php

// RoadRunner's PHP RPC client as spiral/goridge 3.x implements it (Spiral\Goridge\RPC\RPC with JsonCodec over
// a SocketRelay), reproduced without Composer and without Ferry's library, so that the tests call the server
// the way RoadRunner users' code does: one frame with options [seq, strlen(method)] and flags = the codec
// (JSON 0x08), payload method . json_encode(payload); the answer must have 2 options and the same seq, its body
// after the method name is JSON, or an error when the ERROR flag (0x40) is set.
//
//   php rr_rpc_client.php ADDRESS METHOD JSON_PAYLOAD [METHOD JSON_PAYLOAD ...]
// prints one line per call: "ok <json>" or "error <message>" (calls share one connection, seq 1, 2, ...).
declare(strict_types=1);

[$self, $address] = [$argv[0], $argv[1] ?? ''];
$calls = array_slice($argv, 2);
$socket = stream_socket_client($address, $errno, $error, 5.0);
if ($socket === false) {
    fwrite(STDERR, "cannot connect to $address: $error\n");
    exit(1);
}
stream_set_timeout($socket, 30);

function goridge_frame(string $payload, array $options, int $flags): string
{
    // Frame header as spiral/goridge's Frame::packFrame: version 1 and header length in words, flags, length,
    // CRC-32 of the first 6 bytes, two zero bytes, then the options.
    $hl = 3 + count($options);
    $head = chr((1 << 4) | $hl) . chr($flags) . pack('V', strlen($payload));
    $head .= pack('V', crc32($head)) . "\0\0";
    foreach ($options as $o) {
        $head .= pack('V', $o);
    }
    return $head . $payload;
}

function read_exact($socket, int $n): string
{
    $buf = '';
    while (strlen($buf) < $n) {
        $chunk = fread($socket, $n - strlen($buf));
        if ($chunk === false || $chunk === '') {
            throw new RuntimeException('connection closed');
        }
        $buf .= $chunk;
    }
    return $buf;
}

$seq = 1;
for ($i = 0; $i + 1 < count($calls); $i += 2, ++$seq) {
    $method = $calls[$i];
    $body = $method . json_encode(json_decode($calls[$i + 1], true));
    fwrite($socket, goridge_frame($body, [$seq, strlen($method)], 0x08));
    try {
        $head = read_exact($socket, 12);
        $hl = ord($head[0]) & 0x0F;
        $flags = ord($head[1]);
        $len = unpack('V', substr($head, 2, 4))[1];
        if (unpack('V', substr($head, 6, 4))[1] !== crc32(substr($head, 0, 6))) {
            throw new RuntimeException('CRC mismatch');
        }
        $options = array_values(unpack('V*', read_exact($socket, 4 * ($hl - 3))));
        $payload = $len > 0 ? read_exact($socket, $len) : '';
    } catch (RuntimeException $e) {
        echo 'error ', $e->getMessage(), "\n";
        exit(2);
    }
    if (count($options) !== 2) {
        echo "error Invalid RPC frame, options missing\n";
        exit(2);
    }
    if ($options[0] !== $seq) {
        echo "error Invalid RPC frame, sequence mismatch\n";
        exit(2);
    }
    $result = substr($payload, $options[1]);
    if (($flags & 0x40) !== 0) {
        echo "error $result\n";
        continue;
    }
    echo 'ok ', json_encode(json_decode($result, true)), "\n";
}
