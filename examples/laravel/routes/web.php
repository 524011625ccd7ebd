<?php

use App\Http\Controllers\AppController;
use Illuminate\Support\Facades\Route;

Route::get('/', [AppController::class, 'home']);
Route::post('/notes', [AppController::class, 'storeNote']);
Route::post('/upload', [AppController::class, 'upload']);
Route::get('/download', [AppController::class, 'download']);
Route::get('/stream', [AppController::class, 'stream']);
Route::match(['GET', 'POST'], '/session', [AppController::class, 'session']);
Route::post('/login', [AppController::class, 'login']);
Route::get('/state', [AppController::class, 'state']);
Route::get('/cookie', [AppController::class, 'cookie']);
Route::get('/echo', [AppController::class, 'echo']);
Route::get('/tx', [AppController::class, 'transaction']);
Route::get('/boom', [AppController::class, 'boom']);
Route::get('/fatal', [AppController::class, 'fatal']);
Route::get('/exit', [AppController::class, 'exit']);
