<?php

namespace App\Services;

/** A container singleton with state: what one request puts here must not reach the next. */
class Scratch
{
    public ?string $value = null;
}
