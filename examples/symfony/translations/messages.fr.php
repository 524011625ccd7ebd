<?php

return ['hello' => 'Bonjour'];
