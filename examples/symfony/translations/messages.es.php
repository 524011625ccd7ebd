<?php

return ['hello' => 'Hola'];
