"""mirrorline-pii-plugin: the ``PiiMask`` transform (see ``mirrorline_pii.masking``)."""
