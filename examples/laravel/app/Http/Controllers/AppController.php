<?php

namespace App\Http\Controllers;

use App\Models\User;
use App\Providers\AppServiceProvider;
use App\Services\Scratch;
use Illuminate\Foundation\Application;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;
use Illuminate\Support\Facades\App;
use Illuminate\Support\Facades\Auth;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\View;

class AppController extends Controller
{
    private static int $served = 0; // requests this worker served: the application is booted once

    private ?string $visitor = null; // set by /state: a controller is made per request, as under php-fpm

    public function home(Request $request)
    {
        $request->session()->put('visits', $request->session()->get('visits', 0) + 1);
        return view('home', [
            'pid' => getmypid(),
            'served' => ++self::$served,
            'visits' => $request->session()->get('visits'),
            'notes' => DB::table('notes')->orderBy('id')->pluck('body'),
        ]);
    }

    public function storeNote(Request $request)
    {
        $data = $request->validate(['body' => 'required|string|max:200']);
        DB::table('notes')->insert(['body' => $data['body'], 'created_at' => now()->toDateTimeString()]);
        return back()->with('status', 'Note added: '.$data['body']);
    }

    public function info(Request $request)
    {
        if ($request->query('gc')) {
            gc_collect_cycles(); // each request's sandbox is a cycle (the app holds itself): PHP frees it in time
        }
        return response()->json([
            'framework' => 'laravel',
            'version' => Application::VERSION,
            'pid' => getmypid(),
            'served' => ++self::$served,
            'boots' => AppServiceProvider::$boots,
            'memory' => memory_get_usage(),
        ]);
    }

    public function notes()
    {
        return ['notes' => DB::table('notes')->orderBy('id')->pluck('body'), 'level' => DB::transactionLevel()];
    }

    public function upload(Request $request)
    {
        $file = $request->file('file');
        if ($file === null || !$file->isValid()) {
            return response()->json(['error' => $file ? $file->getErrorMessage() : 'no file'], 400);
        }
        $size = $file->getSize();
        $sha = hash_file('sha256', $file->getPathname());
        $name = bin2hex(random_bytes(8)).'-'.preg_replace('/[^A-Za-z0-9._-]/', '_', $file->getClientOriginalName());
        $stored = $file->move(storage_path('app/uploads'), $name);
        return ['name' => $file->getClientOriginalName(), 'size' => $size, 'sha256' => $sha, 'stored' => $stored->getPathname()];
    }

    public function download()
    {
        return response()->download(public_path('assets/app.css'), 'style.css', ['Content-Type' => 'text/css']);
    }

    public function stream(Request $request)
    {
        $n = max(1, min(100, (int) $request->query('n', 3)));
        $ms = max(0, min(2000, (int) $request->query('ms', 200)));
        return response()->stream(function () use ($n, $ms) {
            for ($i = 1; $i <= $n; ++$i) {
                echo "line $i at ".sprintf('%.3f', microtime(true))."\n";
                flush();
                usleep($ms * 1000);
            }
        }, 200, ['Content-Type' => 'text/plain']);
    }

    // This user's counter, name, login and locale, and what a shared singleton held when the request began.
    public function session(Request $request, Scratch $scratch)
    {
        $session = $request->session();
        if ($request->isMethod('POST')) {
            $session->put('name', (string) $request->input('name'));
        }
        $session->put('n', $session->get('n', 0) + 1);
        $before = $scratch->value;
        $scratch->value = $session->get('name');
        return [
            'n' => $session->get('n'),
            'name' => $session->get('name'),
            'id' => $session->getId(),
            'user' => optional(Auth::user())->name,
            'locale' => App::getLocale(),
            'hello' => __('messages.hello'),
            'scratch_before' => $before,
        ];
    }

    public function login(Request $request)
    {
        $user = User::firstOrCreate(['name' => (string) $request->input('name')]);
        Auth::login($user);
        $request->session()->put('locale', (string) $request->input('locale', 'en'));
        return ['user' => $user->name, 'id' => $user->id];
    }

    // ?set=x changes a container singleton, a container instance, the config, the locale and the views'
    // shared data for this request only: the next request sees none of it.
    public function state(Request $request, Scratch $scratch)
    {
        $before = [
            'scratch' => $scratch->value,
            'instance' => app()->bound('last.visitor') ? app('last.visitor') : null,
            'config' => config('app.name'),
            'locale' => App::getLocale(),
            'shared' => View::shared('visitor'),
            'controller' => $this->visitor,
        ];
        if ($set = $request->query('set')) {
            $this->visitor = $set;
            $scratch->value = $set;
            app()->instance('last.visitor', $set);
            config(['app.name' => "changed by $set"]);
            App::setLocale('de');
            View::share('visitor', $set);
        }
        return ['before' => $before, 'now' => $scratch->value];
    }

    // ?set=v queues an encrypted cookie; the response shows what the request's cookie decrypted to.
    public function cookie(Request $request)
    {
        if ($request->has('set')) {
            cookie()->queue('flavour', $request->query('set'), 10);
        }
        return ['flavour' => $request->cookie('flavour'), 'plain' => $request->cookie('plain')];
    }

    // Legacy code that prints from a controller: php-fpm sends it before the body; so does Ferry.
    // What the app reads from a request body: a JSON body and a form alike ($request->input())
    public function input(Request $request)
    {
        return response()->json(['all' => $request->all(), 'name' => $request->input('name'), 'b' => $request->input('a.b')]);
    }

    public function echo()
    {
        echo "printed by the controller\n";
        printf("%s\n", 'and printf');
        return response("the response body\n", 200, ['Content-Type' => 'text/plain']);
    }

    // Opens a transaction and writes; ?fail=1 throws before committing (the worker must roll it back).
    public function transaction(Request $request)
    {
        $level = DB::transactionLevel();
        DB::beginTransaction();
        DB::table('notes')->insert(['body' => 'tx '.$request->query('tag', '?')]);
        if ($request->query('fail')) {
            throw new \RuntimeException('failed inside a transaction');
        }
        DB::commit();
        return ['level_before' => $level];
    }

    public function boom()
    {
        throw new \RuntimeException('boom from the controller');
    }

    public function fatal()
    {
        eval('function ferry_example_twice() {} function ferry_example_twice() {}'); // a fatal error, not an exception
    }

    public function exit()
    {
        exit(3);
    }
}
