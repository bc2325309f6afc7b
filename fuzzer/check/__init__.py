"""``affuzz check``: the user's own ``autograd.Function`` under test (NOTE [check oracles] in
:mod:`fuzzer.codegen.check_render`): its targets and inputs (:mod:`.targets`), the rule and torch oracles
over every stack of depth <= 2 with shrinking (:mod:`.engine`), findings, repros and the table
(:mod:`.output`). Sits beside the campaign: it imports the judge, codegen and publish layers below it."""
