"""Tests of dedebate/trees/: claim trees and rho-stability."""
