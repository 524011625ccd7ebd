<?php

namespace App\Controller;

use App\Service\Notes;
use App\Service\Scratch;
use Symfony\Bundle\FrameworkBundle\Controller\AbstractController;
use Symfony\Component\HttpFoundation\Cookie;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\HttpFoundation\StreamedResponse;
use Symfony\Contracts\Translation\TranslatorInterface;

class AppController extends AbstractController
{
    private static int $served = 0; // requests this worker's kernel served: it is booted once
    private static array $leaked = []; // what /leak keeps for the life of the worker

    public function home(Request $request, Notes $notes): Response
    {
        $session = $request->getSession();
        $session->set('visits', $session->get('visits', 0) + 1);
        return $this->render('home.html.twig', [
            'pid' => getmypid(),
            'served' => ++self::$served,
            'visits' => $session->get('visits'),
            'notes' => $notes->all(),
        ]);
    }

    // The form of the home page: CSRF-checked, stored in SQLite, then back home with a flash message.
    public function addNote(Request $request, Notes $notes): Response
    {
        if (!$this->isCsrfTokenValid('note', (string) $request->request->get('_token'))) {
            return new Response("invalid CSRF token\n", 419, ['Content-Type' => 'text/plain']);
        }
        $text = trim((string) $request->request->get('text'));
        if ($text === '') {
            $this->addFlash('error', 'A note needs some text.');
        } else {
            $notes->add($text);
            $this->addFlash('notice', sprintf('Note "%s" saved.', $text));
        }
        return $this->redirectToRoute('home');
    }

    // A request that fails with a transaction open: the next request must not see its insert.
    public function failNote(Request $request, Notes $notes): Response
    {
        $notes->addThenFail((string) $request->request->get('text', 'never committed'));
    }

    public function notes(Notes $notes): JsonResponse
    {
        return new JsonResponse(['notes' => $notes->all(), 'in_transaction' => $notes->inTransaction()]);
    }

    public function info(): JsonResponse
    {
        return new JsonResponse([
            'framework' => 'symfony',
            'version' => \Symfony\Component\HttpKernel\Kernel::VERSION,
            'pid' => getmypid(),
            'served' => ++self::$served,
        ]);
    }

    // GET: this client's counter, name and locale; POST name=...[&locale=fr]: stores them (the locale is
    // applied from the next request on, by App\EventSubscriber\SessionLocale).
    public function session(Request $request, TranslatorInterface $translator): JsonResponse
    {
        $session = $request->getSession();
        if ($request->isMethod('POST')) {
            $session->set('name', (string) $request->request->get('name'));
            if ($request->request->has('locale')) {
                $session->set('_locale', (string) $request->request->get('locale'));
            }
        }
        $session->set('n', $session->get('n', 0) + 1);
        return new JsonResponse([
            'n' => $session->get('n'),
            'name' => $session->get('name'),
            'id' => $session->getId(),
            'locale' => $request->getLocale(),
            'hello' => $translator->trans('hello'),
        ]);
    }

    public function upload(Request $request): JsonResponse
    {
        $file = $request->files->get('file');
        if ($file === null || !$file->isValid()) {
            return new JsonResponse(['error' => $file ? $file->getErrorMessage() : 'no file'], 400);
        }
        $size = $file->getSize();
        $sha = hash_file('sha256', $file->getPathname());
        $dir = $this->getParameter('kernel.project_dir').'/var/uploads';
        $name = bin2hex(random_bytes(8)).'-'.preg_replace('/[^A-Za-z0-9._-]/', '_', $file->getClientOriginalName());
        $moved = $request->request->get('keep') === '0' ? null : $file->move($dir, $name);
        return new JsonResponse([
            'name' => $file->getClientOriginalName(),
            'size' => $size,
            'sha256' => $sha,
            'stored' => $moved ? $moved->getPathname() : null,
            'tmp' => $file->getPathname(),
        ]);
    }

    public function lines(Request $request): StreamedResponse
    {
        $n = max(1, min(100, $request->query->getInt('n', 3)));
        $ms = max(0, min(2000, $request->query->getInt('ms', 200)));
        return new StreamedResponse(function () use ($n, $ms) {
            for ($i = 1; $i <= $n; ++$i) {
                echo "line $i at ".sprintf('%.3f', microtime(true))."\n";
                flush();
                usleep($ms * 1000);
            }
        }, 200, ['Content-Type' => 'text/plain']);
    }

    // Legacy code that prints from a controller: php-fpm sends it before the body; so does Ferry.
    public function echo(): Response
    {
        header('X-Legacy: set with header()'); // no effect under the CLI (docs/symfony.md); harmless
        echo "printed by the controller\n";
        printf("%s\n", 'and printf');
        return new Response("the response body\n", 200, ['Content-Type' => 'text/plain']);
    }

    // ?set=x keeps x in a shared service for this request only (it is reset before the next one).
    public function state(Request $request, Scratch $scratch): JsonResponse
    {
        $before = $scratch->value;
        if ($request->query->has('set')) {
            $scratch->value = (string) $request->query->get('set');
        }
        return new JsonResponse(['before' => $before, 'now' => $scratch->value]);
    }

    public function boom(): Response
    {
        throw new \RuntimeException('boom from the controller');
    }

    public function exit(): Response
    {
        exit(3);
    }

    // A fatal error (memory exhausted): the worker dies, this client gets 502, the PHP message is logged.
    public function fatal(): Response
    {
        ini_set('memory_limit', '64M');
        $blocks = [];
        for ($i = 0; $i < 100; ++$i) {
            $blocks[] = str_repeat('x', 8 << 20);
        }
        return new Response((string) count($blocks));
    }

    // A BinaryFileResponse: with http.middleware "sendfile" Ferry sends the file itself (Range, 304 included).
    public function download(): Response
    {
        return $this->file($this->getParameter('kernel.project_dir').'/files/manual.txt', 'manual.txt');
    }

    // A leaking app: keeps ?mb= megabytes for the life of the worker; http.pool.supervisor.max_worker_memory
    // replaces the worker between requests, never during one.
    public function leak(Request $request): JsonResponse
    {
        self::$leaked[] = str_repeat(chr(count(self::$leaked) % 256), max(0, min(64, $request->query->getInt('mb', 1))) << 20);
        return new JsonResponse(['pid' => getmypid(), 'served' => ++self::$served, 'rss_kb' => self::rssKb()]);
    }

    private static function rssKb(): int
    {
        return preg_match('/^VmRSS:\s+(\d+)/m', (string) @file_get_contents('/proc/self/status'), $m) ? (int) $m[1] : 0;
    }

    public function cookie(Request $request): Response
    {
        $response = new Response('cookies: '.json_encode($request->cookies->all())."\n");
        $response->headers->setCookie(Cookie::create('a', 'one'));
        $response->headers->setCookie(Cookie::create('b', 'two; with = signs', 0, '/', null, false, true, false, 'strict'));
        return $response;
    }

    public function request(Request $request): JsonResponse
    {
        $s = $request->server;
        return new JsonResponse([
            'method' => $request->getMethod(),
            'uri' => $request->getUri(),
            'path' => $request->getPathInfo(),
            'query' => $request->query->all(),
            'form' => $request->request->all(),
            'headers' => [
                'x-test' => $request->headers->get('x-test'),
                'host' => $request->getHost(),
                'x-sendfile-type' => $request->headers->get('x-sendfile-type'),
            ],
            'cookies' => $request->cookies->all(),
            'content' => $request->getContent(),
            'client_ip' => $request->getClientIp(),
            'secure' => $request->isSecure(),
            'server' => [
                'REMOTE_ADDR' => $s->get('REMOTE_ADDR'),
                'SERVER_PROTOCOL' => $s->get('SERVER_PROTOCOL'),
                'SCRIPT_NAME' => $s->get('SCRIPT_NAME'),
                'REQUEST_TIME_FLOAT' => $s->get('REQUEST_TIME_FLOAT'),
                'HTTPS' => $s->get('HTTPS'),
            ],
        ]);
    }
}
