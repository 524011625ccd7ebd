<?php

return ['hello' => 'Hello'];
