"""Stream queues: the core (an offset log read by every consumer), the actor, the header stamp."""
