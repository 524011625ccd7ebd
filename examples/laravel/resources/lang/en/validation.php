<?php return ['required' => 'The :attribute field is required.', 'max' => ['string' => 'The :attribute may not be greater than :max characters.']];
