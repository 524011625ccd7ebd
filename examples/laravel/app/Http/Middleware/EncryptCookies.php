<?php

namespace App\Http\Middleware;

use Illuminate\Cookie\Middleware\EncryptCookies as Middleware;

class EncryptCookies extends Middleware
{
    /** Cookies sent in clear (the test reads this one as the browser would). */
    protected $except = ['plain'];
}
