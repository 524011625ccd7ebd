<?php

namespace App\Http\Middleware;

use Closure;
use Illuminate\Support\Facades\App;

/** The user's locale, kept in their session, for this request (Ferry puts the config's back after it). */
class SessionLocale
{
    public function handle($request, Closure $next)
    {
        if ($locale = $request->session()->get('locale')) {
            App::setLocale($locale);
        }
        return $next($request);
    }
}
