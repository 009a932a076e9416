"""The shipped configs: ``NAME.yaml`` per experiment and ``sweeps/*.yaml``.

Installed as the package ``dedebate_configs`` (data only), so ``dedebate run NAME`` and
``dedebate sweep sweeps/NAME`` find them outside a checkout.
"""
