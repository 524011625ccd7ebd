<?php

declare(strict_types=1);

// The PHP-level fork template's entry (docs/protocol.md §8.1; Prefork): the server runs the worker command with
// `-d auto_prepend_file=` this file. The template never gets past the first statement; each new worker, a fork
// of it, runs the worker script here, at the top level, so the script's variables are global as they would be
// in a script PHP ran itself. The server embeds this file and the classes it uses into its binary (the lines
// marked ferry:embed-drop are left out there, and the namespace becomes Ferry\Worker\Prefork, so the worker's
// own copy of this library, if any, is not shadowed).

namespace Ferry\Worker;

require_once __DIR__ . '/src/ProtocolException.php'; // ferry:embed-drop
require_once __DIR__ . '/src/Frame.php'; // ferry:embed-drop
require_once __DIR__ . '/src/Relay.php'; // ferry:embed-drop
require_once __DIR__ . '/src/StreamRelay.php'; // ferry:embed-drop
require_once __DIR__ . '/src/ForkTemplate.php'; // ferry:embed-drop
require_once __DIR__ . '/src/Prefork.php'; // ferry:embed-drop

require Prefork::template();
exit;
