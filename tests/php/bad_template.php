<?php

// A fork template that misbehaves (tests/e2e/test_fork.py): as a worker started on its own it is an ordinary
// echo worker; as the template (fd 3 is the server's control socket) it does what $FERRY_TEST_BAD_TEMPLATE says:
//   hang      never answers a fork command
//   foreign   answers with the pid in $FERRY_TEST_FOREIGN_PID (a process that is not the server's child)
//   garbage   answers with bytes that are not a frame
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
$fd3 = @fopen('php://fd/3', 'r');
$st = $fd3 === false ? false : fstat($fd3);
if ($st !== false && ($st['mode'] & 0170000) === 0140000) { // a socket on fd 3: the template; misbehave
    usleep(300000); // the server has sent its first fork command by now
    switch (getenv('FERRY_TEST_BAD_TEMPLATE')) {
        case 'foreign':
            fwrite(STDOUT, Ferry\Worker\Frame::pack(Ferry\Worker\Frame::CONTROL,
                json_encode(['pid' => (int) getenv('FERRY_TEST_FOREIGN_PID')])));
            break;
        case 'garbage':
            fwrite(STDOUT, "this is not a frame\n");
            break;
    }
    sleep(600); // killed by the server
    exit(0);
}
while (($req = $worker->waitRequest()) !== null) {
    $worker->respond(200, ['Content-Type' => 'text/plain'], 'pid ' . getmypid());
}
