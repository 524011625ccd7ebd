<?php

namespace App\Providers;

use App\Services\Scratch;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\ServiceProvider;

class AppServiceProvider extends ServiceProvider
{
    /** How many times this process booted the application: 1 under Ferry, whatever the requests. */
    public static int $boots = 0;

    public function register()
    {
        $this->app->singleton(Scratch::class);
        foreach (['framework/sessions', 'framework/views', 'app/uploads', 'logs'] as $dir) {
            if (!is_dir($path = storage_path($dir))) {
                @mkdir($path, 0775, true);
            }
        }
    }

    public function boot()
    {
        ++self::$boots;
        // The SQLite database is created on first start.
        $file = config('database.connections.sqlite.database');
        if ($file !== ':memory:' && !is_file($file)) {
            @mkdir(dirname($file), 0775, true);
            touch($file);
        }
        DB::statement('CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, created_at TEXT)');
        DB::statement('CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, user_id INTEGER, ip_address TEXT, user_agent TEXT, payload TEXT NOT NULL, last_activity INTEGER NOT NULL)');
        DB::statement('CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, remember_token TEXT, created_at TEXT, updated_at TEXT)');
    }
}
