<?php

// The JSON answer of bench/compression.sh: ~20 KiB of an API's typical list (ids, names, e-mails, dates,
// prices, tags), built per request as an app would, from a fixed seed (the same bytes every time).
declare(strict_types=1);

function bench_json_payload(): string
{
    mt_srand(42);
    $words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliett',
        'kilo', 'lima', 'mike', 'november', 'oscar', 'papa', 'quebec', 'romeo', 'sierra', 'tango'];
    $items = [];
    for ($i = 0; $i < 100; $i++) {
        $first = $words[mt_rand(0, 19)];
        $last = $words[mt_rand(0, 19)];
        $items[] = [
            'id' => 100000 + mt_rand(0, 899999),
            'name' => ucfirst($first) . ' ' . ucfirst($last),
            'email' => $first . '.' . $last . mt_rand(1, 999) . '@example.com',
            'created_at' => date('c', 1700000000 + mt_rand(0, 30000000)),
            'price' => mt_rand(100, 99999) / 100,
            'active' => (bool) mt_rand(0, 1),
            'tags' => array_map(static fn () => $words[mt_rand(0, 19)], range(1, mt_rand(1, 4))),
            'token' => bin2hex(pack('N2', mt_rand(), mt_rand())),
        ];
    }
    return json_encode(['data' => $items, 'meta' => ['page' => 1, 'per_page' => 100, 'total' => 1234]],
        JSON_UNESCAPED_SLASHES);
}
