<?php

namespace App\Service;

use Symfony\Contracts\Service\ResetInterface;

/**
 * A shared service that holds what one request put in it; being resettable (kernel.reset, by autoconfigure),
 * it is emptied before the next request, so a value never reaches another user.
 */
class Scratch implements ResetInterface
{
    public ?string $value = null;

    public function reset(): void
    {
        $this->value = null;
    }
}
