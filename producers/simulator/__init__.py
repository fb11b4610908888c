"""The topology simulator: servers that behave per the domain, a workload, a fault schedule, ground truth.

    topology = load_topology("conf/topology.toml")
    simulation = Simulation(topology, seed=7)
    for event in simulation.events(): ...
    simulation.truth.write(path, seed, events)
"""
