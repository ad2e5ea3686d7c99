"""The daemon around the streaming loop: configuration, metrics, health, logging."""
