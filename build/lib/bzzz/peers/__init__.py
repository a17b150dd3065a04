"""Peers: the nodes of the network and whether they are alive."""
