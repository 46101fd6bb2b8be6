"""The runtime: a tree's library called in a host process (``native``, ``host_client``, ``host``), a CHECK that
fires read as the field it guards (``checks``), the allocation's tensor library opened in the rank (``tensor_lib``),
and a tree's own tests built and run (``own_tests``)."""
