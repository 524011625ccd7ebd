<?php

// Ferry's Laravel runner (docs/laravel.md). 'flush': container bindings resolved afresh in every request's
// sandbox, for singletons the app resolves at boot but that keep per-request state.
return [
    'flush' => [],
];
