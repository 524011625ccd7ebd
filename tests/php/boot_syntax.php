<?php

// A PHP parse error: the process dies before running anything (exit 255).
declare(strict_types=1);

function broken( {
    return 1;
}
