"""What watches the stream beside placing it: the drift monitor (``drift``: residual window, trigger, refit
reservoir) and the input consistency monitor (``consistency``: do rows follow the landmark order?).

They sit beside the streaming layer, not in it: the ``BatchEmbedder`` hands each embedded batch to whatever
monitors it was given, and the daemon and ``streamembed embed`` choose them. The arithmetic is the core's
(``core.monitor``); here are the windows, the cadence, the metrics, the logs and the drift history.
"""
