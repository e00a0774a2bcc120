enable subgroups;
