<?php

namespace App\Http\Middleware;

use Illuminate\Foundation\Http\Middleware\VerifyCsrfToken as Middleware;

class VerifyCsrfToken extends Middleware
{
    /** The JSON and test routes take no form token (a browser form would; see POST /notes). */
    protected $except = ['upload', 'session', 'login', 'tx'];
}
