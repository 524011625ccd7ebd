<!doctype html>
<html lang="{{ app()->getLocale() }}">
<head>
    <meta charset="utf-8">
    <title>Laravel {{ app()->version() }} on Ferry</title>
    <link rel="stylesheet" href="/assets/app.css">
</head>
<body>
<h1>Laravel {{ app()->version() }} on Ferry</h1>
<p>Worker <span id="pid">{{ $pid }}</span> served <span id="served">{{ $served }}</span> requests;
    your visits: <span id="visits">{{ $visits }}</span>.</p>
@if (session('status'))
    <p id="flash">{{ session('status') }}</p>
@endif
@error('body')<p id="error">{{ $message }}</p>@enderror
<form method="post" action="/notes">
    @csrf
    <input name="body" placeholder="a note" maxlength="200">
    <button>Add</button>
</form>
<ul id="notes">
@foreach ($notes as $note)
    <li>{{ $note }}</li>
@endforeach
</ul>
</body>
</html>
