if "." not in __name__:  # imported by its bare folder name in a checkout: be the stepscope. module
    from stepscope._checkout import alias_this

    alias_this(__name__)
