<?php

namespace App\EventSubscriber;

use Symfony\Component\EventDispatcher\EventSubscriberInterface;
use Symfony\Component\HttpKernel\Event\RequestEvent;
use Symfony\Component\HttpKernel\KernelEvents;

/**
 * The locale a user chose stays with their session (Symfony's "sticky locale" recipe): set on the request
 * before the LocaleListener (16) and the translator's LocaleAwareListener see it. Each request starts from
 * its own user's choice, never from the previous request's.
 */
class SessionLocale implements EventSubscriberInterface
{
    public static function getSubscribedEvents(): array
    {
        return [KernelEvents::REQUEST => [['onKernelRequest', 20]]];
    }

    public function onKernelRequest(RequestEvent $event): void
    {
        $request = $event->getRequest();
        if ($request->hasPreviousSession()) {
            $request->setLocale($request->getSession()->get('_locale', $request->getDefaultLocale()));
        }
    }
}
