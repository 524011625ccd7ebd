<?php

return ['hello' => 'Hallo'];
