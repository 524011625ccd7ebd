<?php

// The JSON API (RouteServiceProvider: prefix /api, the "api" middleware group: no session, no CSRF token).

use App\Http\Controllers\AppController;
use Illuminate\Support\Facades\Route;

Route::get('/info', [AppController::class, 'info']);
Route::get('/notes', [AppController::class, 'notes']);
Route::post('/input', [AppController::class, 'input']);
